"""palctl command modules; each exports COMMAND."""
