"""The local runtime behind `make run`: moto's server as the AWS emulator, and the real
handlers wired from the synthesized CloudFormation template. Never imported in Lambda."""
