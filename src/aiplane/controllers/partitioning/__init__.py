"""GPU partitioning controllers (infrastructure.silogen.ai): profiles, plans, per-node partitioning."""
