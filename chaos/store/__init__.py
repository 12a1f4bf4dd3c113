"""Run directories and campaigns on disk: atomic writes, reading stored files back, frozen evidence."""
