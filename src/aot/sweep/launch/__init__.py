"""Where a sweep's trials run: :mod:`aot.sweep.launch.local` trains them here, one after another;
:mod:`aot.sweep.launch.slurm` submits each as a Slurm job through submitit (``aot sweep --launcher slurm``), with
:mod:`aot.sweep.launch.resources` (what a trial asks for), :mod:`aot.sweep.launch.ledger` (which job trains which
trial), :mod:`aot.sweep.launch.jobs` (what Slurm says of them), :mod:`aot.sweep.launch.status` (``aot sweep status``)
and :mod:`aot.sweep.launch.cost` (FLOPs and GPU-hours before anything runs). submitit is imported only by the Slurm
launcher: ``pip install 'aot[slurm]'``."""
