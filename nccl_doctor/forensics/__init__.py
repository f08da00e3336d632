"""Hang forensics across ranks: which rank everyone waits for."""
