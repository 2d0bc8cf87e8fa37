"""Adapters that let other agent frameworks use fsmem as their memory."""
