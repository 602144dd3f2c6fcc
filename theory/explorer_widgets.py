"""The bounds explorer in Jupyter: ipywidgets sliders that redraw `theory.explorer_plots` and the
numbers of `theory.explorer.evaluate` (the notebook only builds a `BoundsExplorer` and shows it).

    from theory.explorer_widgets import BoundsExplorer
    explorer = BoundsExplorer()
    explorer.show()        # sliders, the four panels and the numbers beside them
    explorer.snapshot()    # the same as a PNG and a Markdown table (readable without a kernel)

Every control writes one field of `ExplorerSettings`; a change re-evaluates and redraws
(`continuous_update=False`: on release). `explorer.result` holds the last `ExplorerResult`, so
tests drive the callbacks headless by setting `explorer.controls[name].value`. ipywidgets is
imported here only (the `notebooks` extra).
"""

from __future__ import annotations

import io
import math
from typing import Any

from theory.explorer import (
    SLIDERS,
    ExplorerResult,
    ExplorerSettings,
    explorer_curves,
    numbers_html,
    numbers_markdown,
)
from theory.explorer_plots import plot_explorer

INTEGER_FIELDS = tuple(s.name for s in SLIDERS if s.integer)
PLAIN_TEXT = (
    "Bounds explorer (ipywidgets): run this notebook in Jupyter to move the sliders; the cell "
    "below shows the default setting, and docs/assets/bounds_explorer.html works without a kernel."
)


def _png(figure: Any, dpi: int) -> bytes:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=dpi, metadata={"Software": None})
    return buffer.getvalue()


class BoundsExplorer:
    """Sliders for `eps`, `N`, `tau4`, `eta`, `G`, `delta` and the problem's constants."""

    def __init__(self, settings: ExplorerSettings | None = None, dpi: int = 80) -> None:
        import ipywidgets as widgets

        self.settings = ExplorerSettings() if settings is None else settings
        self.dpi = dpi
        self.controls: dict[str, Any] = {}
        style = {"description_width": "11em"}
        layout = widgets.Layout(width="330px")
        for spec in SLIDERS:
            value = getattr(self.settings, spec.name)
            if spec.log:
                control = widgets.FloatLogSlider(
                    value=value,
                    base=10,
                    min=math.log10(spec.low),
                    max=math.log10(spec.high),
                    step=0.01,
                    readout_format=".3g",
                )
            else:
                control = widgets.FloatSlider(
                    value=value, min=spec.low, max=spec.high, step=0.05, readout_format=".2f"
                )
            control.description = spec.label
            control.style, control.layout, control.continuous_update = style, layout, False
            self.controls[spec.name] = control
        self.controls["constant"] = widgets.ToggleButtons(
            options=[("8 (paper)", "paper"), ("2 (ours)", "ours")],
            value=self.settings.constant,
            description="Prop. 1 constant",
            style=style,
        )
        self.controls["tight"] = widgets.Checkbox(
            value=self.settings.tight, description="tight KL denominators (ours)"
        )
        for name, control in self.controls.items():
            control.observe(lambda change, name=name: self._changed(name, change), names="value")
        self.image = widgets.Image(format="png")
        self.numbers = widgets.HTML()
        self.status = widgets.HTML()
        items = list(self.controls.values())
        third = math.ceil(len(items) / 3)
        columns = [widgets.VBox(items[i : i + third]) for i in range(0, len(items), third)]
        self.widget = widgets.VBox(
            [widgets.HBox(columns), self.status, widgets.HBox([self.image, self.numbers])]
        )
        self.result: ExplorerResult
        self.curves: dict[str, Any]
        self.refresh()

    def _changed(self, name: str, change: dict[str, Any]) -> None:
        value = change["new"]
        if name in INTEGER_FIELDS:
            value = float(round(value))
        self.set(**{name: value})

    def set(self, **changes: Any) -> ExplorerResult:
        """Change some settings, re-evaluate and redraw; an invalid value is shown, not raised."""
        try:
            settings = self.settings.replace(**changes)
        except ValueError as error:
            self.status.value = f"<b style='color:#b00'>{error}</b>"
            return self.result
        self.status.value = ""
        self.settings = settings
        return self.refresh()

    def refresh(self) -> ExplorerResult:
        """Evaluate at the current settings and redraw the figure and the numbers."""
        self.curves = explorer_curves(self.settings)
        self.result = self.curves["result"]
        self.image.value = _png(plot_explorer(self.curves), self.dpi)
        self.numbers.value = numbers_html(self.result)
        return self.result

    def show(self) -> None:
        """Display the sliders, the figure and the numbers (a plain-text note where no kernel)."""
        from IPython.display import display

        bundle = self.widget._repr_mimebundle_()
        bundle["text/plain"] = PLAIN_TEXT
        display(bundle, raw=True)

    def snapshot(self) -> None:
        """Display the current figure (PNG) and numbers (Markdown): what a reader without a
        kernel sees in the stored notebook and on the documentation site."""
        from IPython.display import Image, Markdown, display

        display(Image(self.image.value))
        display(Markdown(numbers_markdown(self.result)))
