"""Permissions (KERNEL 7.3-7.5): rules, built-in defaults, and the ask/reply service with deadlines."""
