"""GPU-utilisation monitoring of our workloads (KaiwoConfig ``resourceMonitoring``): docs/kaiwo.md."""
