"""(CPU kernels: see the module docstring once filled in)"""
