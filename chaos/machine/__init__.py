"""This machine: the processes the harness owns, Java, PySpark versions, ports, scratch, JVM start-up."""
