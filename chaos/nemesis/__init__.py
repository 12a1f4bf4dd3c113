"""Faults: the actions that carry them out, the controller and phase barriers, channels and their proxy."""
