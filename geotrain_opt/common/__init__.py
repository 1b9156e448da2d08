"""What every layer may use and none owns: output files written whole or not at all
(``outputs``) and the provenance and format versions stamped on every file the
package writes (``provenance``). Nothing here knows the problem."""
