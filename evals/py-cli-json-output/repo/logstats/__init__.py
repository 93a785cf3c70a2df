"""Summaries of web server access logs."""
