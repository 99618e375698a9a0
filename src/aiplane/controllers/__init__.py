"""aiplane's controllers; ``registry.CONTROLLERS`` names the ones ``aiplane run`` can start."""
