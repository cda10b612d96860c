"""The built-in paper plug-ins, one folder each, registered under the ``icldyn.papers`` entry-point group."""
