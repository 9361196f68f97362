"""Process machinery shared by every command: the warm child (`warm`) that imports
torchgen and Jinja2 while the parent plans, fork-with-pipes (`forking`), the on-disk cache
(`cache_dir`) and the files published whole into it (`whole_file`).

May import: the standard library and `porter.errors` only.
"""
