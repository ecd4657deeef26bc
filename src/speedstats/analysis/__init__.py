"""The statistics: robust summaries and intervals (stats), head against base in one run (paired),
two runs compared (compare), and the trend plots of a history (trend). Plain computation over
figures; the modules that read results files stand on it, not the other way round."""
