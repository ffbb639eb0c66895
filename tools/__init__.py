"""Command-line tools: mind-opt and mind-translate."""
