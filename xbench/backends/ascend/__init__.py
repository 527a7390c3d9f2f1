"""Ascend C backend: generated Ascend C, compiled and run on xbench's CPU twin (see twin.py)."""
