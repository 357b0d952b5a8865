"""The reporter: applies the daemons' provider reports to Placement, ordered and fenced."""
