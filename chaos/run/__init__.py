"""Running trials: the harness, one trial, its standbys, the checkpoint watcher, admission, the judgement."""
