"""The driver process (``python -m chaos.driver``), its launch, drivers booted ahead, the Python daemon."""
