"""Sinks the catalogue pipelines write to, each reporting its phases to the controller."""
