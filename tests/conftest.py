"""Suite-wide test settings."""

from hypothesis import HealthCheck, settings

# Hypothesis' per-example deadline is a timing assertion: on a loaded 2-core CI machine a first
# example that imports and compiles codecs lazily can take longer than 200 ms. The suite asserts
# behaviour only; speed is measured by the scripts under bench/.
settings.register_profile("mlog", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("mlog")
