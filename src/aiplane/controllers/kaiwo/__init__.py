"""The KaiwoConfig controller: Kueue queues that match the GPU capacity nodes advertise, and GPU taints."""
