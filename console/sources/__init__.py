"""Data sources that need no SSH: a vLLM server's URL alone (`url`), and a Prometheus server
that scrapes a fleet of them (`prometheus`, `fleet_query`). Headless: never imports textual."""
