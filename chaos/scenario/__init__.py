"""What one trial is: the scenario and its events, the fault grammar, configuration variants, payload schemas."""
