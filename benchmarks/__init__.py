"""Side-by-side runs of eager, TorchInductor and mind on the same programs (`python3 -m benchmarks.run`)."""
