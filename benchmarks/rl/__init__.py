"""Learned stop policies: training SB3 agents on the env and scoring them (`train`)."""
