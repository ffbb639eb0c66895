"""The line that divides a generated module (target/triton.py writes it) in two: its kernels
above, which a compile worker runs without torch (runtime/compile_job.py), and the host code
below, which only the loading process runs. Here, below both, so that it is written once; it
imports nothing."""

HOST = "# -- host: the loading process runs what follows, compile workers stop here --"
