"""The scenario: a YAML document -> frozen values, every mistake one line naming the field.

Start with ``schema`` (the dataclasses a scenario maps onto, its fields and limits), then ``load``
(reading a file safely) and ``build`` (one scenario from one document, each section checked in
``sections``). ``sweep`` expands a sweep into cases, ``step`` reads the ``step`` section, ``fields``
holds the checks of single values.
"""
