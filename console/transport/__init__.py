"""The links to a host: the `Host` interface and its two kinds (`SSHHost` over asyncssh,
`LocalHost` on this machine), ssh_config reading, connecting from the command line's words, and
the host-side bundle shipped over the link (`remote_scripts`). Headless."""
