"""Side-by-side runs of eager, TorchInductor and mind on the same programs (`python3 -m benchmarks.run`)."""

import os

#: the environment variables set when the benchmark process started, before torch set any: its
#: `torch._dynamo` import (the profiler's too) sets TORCHINDUCTOR_CACHE_DIR to a default folder
#: that every run shares (`common.fresh_caches`)
CALLER_SET = frozenset(os.environ)
