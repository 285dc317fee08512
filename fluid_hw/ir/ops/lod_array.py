"""(op definitions: see the module docstring once filled in)"""
