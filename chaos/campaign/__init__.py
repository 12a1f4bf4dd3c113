"""Campaigns: the stored campaign, its runner, shards and their merge, Ray, conformance."""
