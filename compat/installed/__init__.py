"""What is installed: the torch capabilities (versions and feature probes), torch's own
``torch.onnx`` functions captured before patching, and the check for the ``runtime`` extra."""
