"""obsctl: a closed optimization loop for GPU and AI workloads on Prometheus and Grafana."""

__version__ = "0.1.0"
