"""Cron exactly as Cloud Scheduler reads it: `schedule` parses and computes fire times,
`describe` turns a schedule into words and DST notes for people."""
