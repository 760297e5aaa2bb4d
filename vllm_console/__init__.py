"""vllm-console's one import name. The repository keeps the product's four folders at its top
(`console/`, `widgets/`, `checks/`, `themes/`); here they are subpackages (links in a checkout,
the folders themselves in the wheel), so that installing the console into a serving venv never
shadows another project's `console`, `checks` or `themes`."""
