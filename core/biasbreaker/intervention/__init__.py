"""Intervention orchestration: routing a tripped step to a mitigation strategy."""
