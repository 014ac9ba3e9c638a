"""Webhooks: a tenant's session lifecycle notifications, signed (Standard Webhooks) and POSTed to the
URLs its config names, retried with back-off, every attempt kept in the delivery log."""
