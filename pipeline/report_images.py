"""The report's images inside `REPORT.html`: every `<img>` whose source is a file beside the
report becomes a `data:` URI (base64), so the page shows its figures when copied alone, mailed
or opened from an archive.

`REPORT.md` keeps relative links (Markdown readers and GitHub want files, and the Markdown stays
small); the HTML carries the bytes. Base64 makes an image a third larger than its PNG: a full
`gmc-grpo reproduce` report (31 figures, 3.8 MB of PNG) is a 5.5 MB page instead of 0.38 MB
(measured; docs/getting-started.md, "Reading the report"). One file was chosen over a folder: a page of that size
opens at once in a browser and fits a mail attachment, and it cannot lose its figures.
"""

from __future__ import annotations

import base64
import html
import re
from pathlib import Path
from urllib.parse import unquote, urlsplit

# mistune writes `<img src="..." alt="..." />`; a source in double quotes, as it writes them
_IMG_SOURCE = re.compile(r'(<img\b[^>]*?\bsrc=")([^"]*)(")', re.IGNORECASE)
MIME_TYPES = {
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".gif": "image/gif",
    ".svg": "image/svg+xml",
    ".webp": "image/webp",
}


def local_image(source: str, base: Path) -> Path | None:
    """The file an `<img src>` names relative to `base` (None for a URL, a data URI or an
    absolute path: only files beside the report are embedded)."""
    parts = urlsplit(html.unescape(source))
    if parts.scheme or parts.netloc or not parts.path or parts.path.startswith("/"):
        return None
    return base / unquote(parts.path)


def data_uri(path: Path) -> str:
    """`data:<mime>;base64,...` of an image file (the type from its suffix)."""
    mime = MIME_TYPES.get(path.suffix.lower())
    if mime is None:
        raise ValueError(f"{path}: not an image type the report embeds ({', '.join(MIME_TYPES)})")
    return f"data:{mime};base64," + base64.b64encode(path.read_bytes()).decode("ascii")


def embed_images(page: str, base: str | Path) -> tuple[str, list[str]]:
    """`(page with every local image inlined, the sources that name no file)`; a source without
    a file keeps its link (the caller reports it)."""
    base = Path(base)
    missing: list[str] = []

    def inline(match: re.Match[str]) -> str:
        source = match.group(2)
        path = local_image(source, base)
        if path is None or path.suffix.lower() not in MIME_TYPES:
            return match.group(0)
        if not path.is_file():
            missing.append(source)
            return match.group(0)
        return match.group(1) + data_uri(path) + match.group(3)

    return _IMG_SOURCE.sub(inline, page), missing


__all__ = ["MIME_TYPES", "data_uri", "embed_images", "local_image"]
