"""What the console shows or writes: host-controlled text made safe for the screen
(`display`). Headless."""
