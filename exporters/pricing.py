"""Pricing collector: the configured prices as series, so cost signals are plain PromQL.

``obsctl_node_price_usd_per_hour`` (when ``pricing.node_hour_usd`` is set) and
``obsctl_accelerator_price_usd_per_hour{gpu_model}`` per configured model. The example spec's
cost signal divides ``sum(obsctl_node_price_usd_per_hour{$node_selector}) / 3600`` by the
token rate: the node selector picks this exporter's scrape job, so the price series carries
no node label of its own (the node comes from the scrape target).
"""

from __future__ import annotations

from prometheus_client.core import GaugeMetricFamily, Metric

from obsctl.spec import Pricing


class PricingCollector:
    """Publishes configured prices in USD per hour (no configured price -> no series).

    Args:
        pricing: the spec's ``pricing`` section (``obsctl.spec.Pricing``).
    """

    name = "pricing"
    description = "configured prices: obsctl_node_price_usd_per_hour, obsctl_accelerator_price_usd_per_hour{gpu_model}"
    isolate = False  # no I/O: runs on the scrape thread

    def __init__(self, pricing: Pricing) -> None:
        self.pricing = pricing

    def collect(self, ctx: object) -> list[Metric]:
        """Fresh families each scrape (values in USD per hour)."""
        out: list[Metric] = []
        if self.pricing.node_hour_usd is not None:
            node = GaugeMetricFamily("obsctl_node_price_usd_per_hour",
                                     "Configured price of this node per hour, USD (pricing.node_hour_usd).")
            node.add_metric([], self.pricing.node_hour_usd)
            out.append(node)
        if self.pricing.accelerator_hour_usd:
            acc = GaugeMetricFamily("obsctl_accelerator_price_usd_per_hour",
                                    "Configured price of one accelerator of this model per hour, USD "
                                    "(pricing.accelerator_hour_usd).", labels=["gpu_model"])
            for model, price in sorted(self.pricing.accelerator_hour_usd.items()):
                acc.add_metric([model], price)
            out.append(acc)
        return out

    def close(self) -> None:
        """Nothing to release."""
