"""The test session runs under the CPU kernel pin of every command line (`gmc_grpo.determinism`).

Set here, before any torch kernel runs, so that the test process and the processes its tests start
(the engine process, suite workers, sweep jobs) compute with the same kernels and threads, and a
command's `main` called in process finds the pin already standing. Without it, the first in-process
`main` decided the level of the rest of the session while later children inherited other variables,
and the equality tests between in-process and child-process records failed depending on test order
(found when the pin landed). `GMC_GRPO_CPU_KERNELS=native` runs the suite unpinned.
"""

from gmc_grpo.determinism import pin_cpu_kernels

pin_cpu_kernels()
