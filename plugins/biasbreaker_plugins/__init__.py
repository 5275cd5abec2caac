"""First-party plugins of biasbreaker.

Each module is registered through the ``biasbreaker`` entry-point group, exactly like a
third-party plugin, and contributes named implementations to the kernel's extension points.
"""
