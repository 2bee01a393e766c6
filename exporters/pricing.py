"""Pricing collector: the configured prices as series, so cost rules are plain PromQL.

* ``obsctl_node_price_usd_per_hour`` (when ``pricing.node_hour_usd`` is set),
* ``obsctl_accelerator_price_usd_per_hour{gpu_model}`` per configured model,
* ``obsctl_energy_price_usd_per_kwh`` (when ``pricing.energy_usd_per_kwh`` is set),
* ``obsctl_pricing_model_info{pricing_model}`` = 1, the model the prices above are for.

A price given per pricing model (``{on_demand, reserved, spot}``) is published for the
spec's ``pricing.pricing_model`` only, so every price series stays one value per node and
``sum`` never adds two pricing models of one node. The series carry no node label of their
own: the node comes from the scrape target (``instance``), and the cost rules join the
GPU series on it (see ``obsctl.rules.cost``).
"""

from __future__ import annotations

from prometheus_client.core import GaugeMetricFamily, Metric

from obsctl.spec import Pricing


class PricingCollector:
    """Publishes configured prices (USD per hour, USD per kWh); no configured price -> no series.

    Args:
        pricing: the spec's ``pricing`` section (``obsctl.spec.Pricing``).
    """

    name = "pricing"
    description = ("configured prices: obsctl_node_price_usd_per_hour, obsctl_accelerator_price_usd_per_hour{gpu_model}, "
                   "obsctl_energy_price_usd_per_kwh, obsctl_pricing_model_info{pricing_model}")
    isolate = False  # no I/O: runs on the scrape thread

    def __init__(self, pricing: Pricing) -> None:
        self.pricing = pricing

    def collect(self, ctx: object) -> list[Metric]:
        """Fresh families each scrape."""
        out: list[Metric] = []
        node_price = self.pricing.node_price()
        if node_price is not None:
            node = GaugeMetricFamily("obsctl_node_price_usd_per_hour",
                                     "Configured price of this node per hour, USD (pricing.node_hour_usd).")
            node.add_metric([], node_price)
            out.append(node)
        prices = self.pricing.accelerator_prices()
        if prices:
            acc = GaugeMetricFamily("obsctl_accelerator_price_usd_per_hour",
                                    "Configured price of one accelerator of this model per hour, USD "
                                    "(pricing.accelerator_hour_usd).", labels=["gpu_model"])
            for model, price in sorted(prices.items()):
                acc.add_metric([model], price)
            out.append(acc)
        if self.pricing.energy_usd_per_kwh is not None:
            energy = GaugeMetricFamily("obsctl_energy_price_usd_per_kwh",
                                       "Configured electricity price, USD per kWh (pricing.energy_usd_per_kwh).")
            energy.add_metric([], self.pricing.energy_usd_per_kwh)
            out.append(energy)
        if out:
            info = GaugeMetricFamily("obsctl_pricing_model_info", "The pricing model the configured prices are for; always 1.",
                                     labels=["pricing_model"])
            info.add_metric([self.pricing.pricing_model], 1)
            out.append(info)
        return out

    def close(self) -> None:
        """Nothing to release."""
