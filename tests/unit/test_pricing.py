"""Pricing in the spec and the exporter's price series: pricing models, energy price, compatibility."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from obsctl.exporters.pricing import PricingCollector
from obsctl.spec import Pricing


def _samples(families, name):
    return {tuple(sorted(s.labels.items())): s.value for f in families for s in f.samples if s.name == name}


def test_plain_numbers_still_mean_on_demand():
    p = Pricing(node_hour_usd=0.4, accelerator_hour_usd={"H100": 4.1})
    assert p.node_price() == 0.4 and p.accelerator_prices() == {"H100": 4.1}
    assert p.node_hour_usd == 0.4  # existing readers of the field keep working


def test_pricing_model_picks_the_price_and_is_published():
    p = Pricing(pricing_model="spot", energy_usd_per_kwh=0.12,
                accelerator_hour_usd={"H100": {"on_demand": 4.1, "spot": 1.7}, "A100": {"spot": 0.9}})
    out = PricingCollector(p).collect(None)
    assert _samples(out, "obsctl_accelerator_price_usd_per_hour") == {(("gpu_model", "A100"),): 0.9, (("gpu_model", "H100"),): 1.7}
    assert _samples(out, "obsctl_energy_price_usd_per_kwh") == {(): 0.12}
    assert _samples(out, "obsctl_pricing_model_info") == {(("pricing_model", "spot"),): 1.0}
    assert "obsctl_node_price_usd_per_hour" not in {s.name for f in out for s in f.samples}


def test_missing_price_for_the_pricing_model_is_an_error():
    with pytest.raises(ValidationError, match="A100: no reserved price"):
        Pricing(pricing_model="reserved", accelerator_hour_usd={"A100": {"spot": 0.9}})
    with pytest.raises(ValidationError, match="greater than or equal to 0"):
        Pricing(accelerator_hour_usd={"A100": {"spot": -1}})
    with pytest.raises(ValidationError, match="label name"):
        Pricing(opencost_node_label="bad-label")


def test_no_prices_no_series():
    assert PricingCollector(Pricing(idle_utilization_ratio=0.2)).collect(None) == []


@pytest.mark.parametrize("fields, where", [
    ({"node_hour_usd": True}, "node_hour_usd"),                        # YAML `on` / `yes` would be a 1 USD price
    ({"accelerator_hour_usd": {"A100": True}}, "accelerator_hour_usd"),
    ({"accelerator_hour_usd": {"A100": {"on_demand": 2.0, "spot": True}}}, "spot"),
    ({"energy_usd_per_kwh": False}, "energy_usd_per_kwh"),
    ({"idle_utilization_ratio": True}, "idle_utilization_ratio"),
])
def test_true_or_false_is_not_a_price(fields, where):
    with pytest.raises(ValidationError, match="must be a number, not true/false") as info:
        Pricing(**fields)
    assert where in str(info.value)


@pytest.mark.parametrize("name", ["", "  ", "NVIDIA\nH100"])
def test_gpu_model_names_are_printable_and_not_empty(name):
    with pytest.raises(ValidationError, match="must be the name NVML reports"):
        Pricing(accelerator_hour_usd={name: 4.1})


def test_true_or_false_is_not_a_saturation_threshold_or_flops_figure():
    from obsctl.spec import MfuConfig, Saturation

    with pytest.raises(ValidationError, match="must be a number, not true/false"):
        Saturation(busy_ratio=True)
    with pytest.raises(ValidationError, match="must be a number, not true/false"):
        Saturation(classes={"a": {"queue_depth": True}})
    with pytest.raises(ValidationError, match="must be a number, not true/false"):
        MfuConfig(flops_per_token=True)
    assert MfuConfig(flops_per_token=7.8e9, dtype="bf16").flops_per_token == 7.8e9  # numbers still are
