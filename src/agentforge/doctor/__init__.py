"""Deployment verification: the checks behind `agentforge doctor` and `agentforge serve --production`."""
