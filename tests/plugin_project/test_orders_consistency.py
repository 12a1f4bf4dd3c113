"""The user's CI tests: only the plugin's public marker and fixture."""

import pytest


@pytest.mark.consistency(expect="exactly-once", examples=["kill-driver@1:sink-done"])
def test_orders_by_batch_is_exactly_once(chaos_check):
    chaos_check("orders:ORDERS_BY_BATCH")


@pytest.mark.consistency(expect="exactly-once", examples=["kill-driver@1:sink-done"])
def test_orders_append_is_exactly_once(chaos_check):
    chaos_check("orders:ORDERS_APPEND")
