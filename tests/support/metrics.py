"""Reading a Prometheus text exposition back as samples, for the metrics tests."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

#: (sample name, sorted labels) → value.
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def parse_samples(text: str) -> Samples:
    """Every sample of an exposition, parsed by the Prometheus text parser."""
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def sample_value(samples: Samples, name: str, **labels: str) -> float:
    """The value of one sample; 0 when it is absent (a counter or gauge never set)."""
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)
